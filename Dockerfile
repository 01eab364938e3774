# The Harness-S worker image: `docker compose` runs it as the control,
# rollout and trainer workers (docker-compose.yml), each with its own
# `--queues`. TypeScript runs as it is, through tsx, as `npm run worker` does.
#
# Not built on the project's CI machine (no Docker engine there); the compose
# test (test/unit/compose.test.ts) checks this file's entrypoint offline.

# Debian, not Alpine: the Temporal SDK's native core is built for glibc.
FROM node:20-bookworm-slim AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production
# The SWE env: bubblewrap (its sandbox) and python3-seccomp (libseccomp, which compiles
# the sandbox's seccomp filter), git (its trees and diffs), Python 3.11 with venv and
# pip (the tests' venv; AppWorld's venv); setpriv and prlimit come with util-linux.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap python3-seccomp git python3 python3-venv python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY core ./core
COPY activities ./activities
COPY workflows ./workflows
COPY workers ./workers
COPY sim-cluster ./sim-cluster
COPY viewer ./viewer
COPY infra ./infra
COPY cli ./cli
COPY data ./data
COPY examples ./examples
# Mount points of the named volumes: Docker gives a new volume the owner of the
# folder it is mounted on, so the worker (user node) can write its adapters and frozen pools.
# The adapters volume starts with lora-resolver/, which vLLM's LoRA resolver needs at its start.
RUN mkdir -p /data/adapters/lora-resolver /data/pools /data/skyrl-checkpoints /data/swe /data/appworld /data/openenv && chown node:node /data/adapters /data/adapters/lora-resolver /data/pools /data/swe /data/appworld /data/openenv
USER node

ENV HARNESS_S_ADAPTER_DIR=/data/adapters \
    HARNESS_S_POOLS_DIR=/data/pools \
    HARNESS_S_METRICS_PORT=9464
EXPOSE 9464
# One process (tsx as a loader, not a parent process), so SIGTERM from
# `docker compose stop` reaches the worker, which drains its activities.
ENTRYPOINT ["node", "--import", "tsx", "workers/main.ts"]
CMD ["--queues", "control,rollout,trainer"]
