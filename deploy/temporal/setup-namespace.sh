#!/bin/sh
# The namespace the workers use and the search attributes runs are listed by
# (workflows/definitions.ts SEARCH_ATTRIBUTES; the dev server gets the same
# ones from infra/temporal-dev-server.ts). Run by the compose service
# `temporal-setup` once the server answers; safe on every `up`: what exists is
# kept.
#
# Env: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, NAMESPACE_RETENTION (e.g. 30d),
# SEARCH_ATTRIBUTES ("Name=Type Name=Type ...", types as the temporal CLI names them).
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is not set}"
: "${SEARCH_ATTRIBUTES:?SEARCH_ATTRIBUTES is not set}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
RETENTION="${NAMESPACE_RETENTION:-30d}"

echo "temporal-setup: waiting for the Temporal server at $TEMPORAL_ADDRESS"
tries=0
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then
    echo "temporal-setup: the Temporal server at $TEMPORAL_ADDRESS did not report healthy in 2 minutes" >&2
    exit 1
  fi
  sleep 2
done

if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" >/dev/null 2>&1; then
  echo "temporal-setup: namespace $NAMESPACE exists"
else
  echo "temporal-setup: creating namespace $NAMESPACE (retention $RETENTION)"
  temporal operator namespace create --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" --retention "$RETENTION"
fi

existing=$(temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE")
for attribute in $SEARCH_ATTRIBUTES; do
  name="${attribute%%=*}"
  type="${attribute#*=}"
  if printf '%s\n' "$existing" | grep -qw "$name"; then
    echo "temporal-setup: search attribute $name exists"
  else
    echo "temporal-setup: adding search attribute $name ($type)"
    temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" --namespace "$NAMESPACE" --name "$name" --type "$type"
  fi
done
echo "temporal-setup: done"
