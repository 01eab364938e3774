/**
 * What `harness-s config check` says about a valid run config beyond its
 * validity: the endpoints the run will use, as it will use them, and the
 * warnings a config that parses can still deserve. The main one is a mixed
 * world: a real policy trained by the SIMULATED trainer (the default when no
 * trainer is given), or the reverse, or a real trainer at the learning rate
 * tuned for the simulator. Pure: no I/O, nothing read from the environment.
 */
import type { RunConfig } from './config';
import { isSimClusterUrl, SIM_CLUSTER_URL, SIM_POLICY_MODEL } from './config-endpoints';
import { SIM_LEARNING_RATE } from './config-trainer';
import type { ConfigIssue } from './zod-errors';
import { isSimulatedEnv } from './sim-kind';

/** A warning: the config is valid, but likely not what its writer meant. Named by the field to look at. */
export type ConfigWarning = ConfigIssue;

/** An endpoint or server a run (or an evolution) will talk to. */
export interface ConfigEndpoint {
  /** policy, trainer, voter, env, tracking (an evolution: executor, proposer, env). */
  role: string;
  /** Where in the config it is set. */
  path: string;
  /** Its address as the workers will use it (a password in it is shown as ***), or what the workers start. */
  address: string;
  /** The model it serves, for a model endpoint. */
  model?: string;
  /** The workers' environment variable its API key is read from. */
  apiKeyEnv?: string;
  /** The SIMULATED sim cluster's (or the simulator's). */
  simulated: boolean;
  /** Anything else the address alone does not say. */
  note?: string;
}

/** A policy-like section: a run's policy or an evolution's executor. */
export interface PolicyEndpoint {
  baseUrl: string;
  model: string;
  apiKeyEnv?: string;
  inferenceServers?: readonly string[];
}

/** The URLs rollouts are sent to: every inference server, or baseUrl alone. */
export function policyUrls(policy: PolicyEndpoint): string[] {
  return policy.inferenceServers && policy.inferenceServers.length > 0 ? [...policy.inferenceServers] : [policy.baseUrl];
}

/** Whether a policy is the SIMULATED one: the sim cluster's model, or every URL at the sim cluster's address. */
export function isSimulatedPolicy(policy: PolicyEndpoint): boolean {
  return policy.model === SIM_POLICY_MODEL || policyUrls(policy).every(isSimClusterUrl);
}

/** "http://vllm:8000/v1 (model Qwen/Qwen3-8B)", the replicas joined. */
export function policyText(policy: PolicyEndpoint): string {
  return `${policyUrls(policy).join(', ')} (model ${policy.model})`;
}

/** The value at a dotted path of a raw config, or undefined: to tell a field left to its default from one given. */
export function rawValueAt(raw: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>((node, key) => (node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined), raw);
}

/**
 * The env and the policy (or an evolution's executor) from different worlds:
 * the SIMULATED sim env with a real model, or a real env with the SIMULATED
 * policy, which acts in the sim world's terms only.
 */
export function envPolicyWarnings(env: RunConfig['env'], policy: PolicyEndpoint, policyPath: string): ConfigWarning[] {
  const simulatedPolicy = isSimulatedPolicy(policy);
  if (isSimulatedEnv(env.kind) && !simulatedPolicy) {
    return [
      {
        path: 'env.kind',
        message: `env '${env.kind}' is the SIMULATED world, but ${policyPath} is a real endpoint, ${policyText(policy)}: the sim world's tasks are made for the SIMULATED policy of the sim cluster (${SIM_CLUSTER_URL}/v1)`,
      },
    ];
  }
  if (!isSimulatedEnv(env.kind) && simulatedPolicy) {
    return [
      {
        path: `${policyPath}.baseUrl`,
        message: `env '${env.kind}' is a real env, but ${policyPath} is the SIMULATED sim cluster's policy, ${policyText(policy)}, which acts in the sim world only: set ${policyPath}.baseUrl and ${policyPath}.model to your inference server`,
      },
    ];
  }
  return [];
}

/**
 * What a valid run config may still get wrong: the policy and the trainer
 * from different worlds (one real, one the SIMULATED sim cluster), a real
 * trainer at the simulator's learning rate, the env and the policy from
 * different worlds. `raw` is the config as written, to tell a field left out.
 */
export function runConfigWarnings(config: RunConfig, raw: unknown): ConfigWarning[] {
  const { policy, trainer } = config;
  const simulatedPolicy = isSimulatedPolicy(policy);
  const simulatedTrainer = isSimClusterUrl(trainer.baseUrl);
  const trainerText = `${trainer.baseUrl}${rawValueAt(raw, 'trainer.baseUrl') === undefined ? ' (trainer.baseUrl not set: the default)' : ''}`;
  const warnings: ConfigWarning[] = [];
  if (!simulatedPolicy && simulatedTrainer) {
    warnings.push({
      path: 'trainer.baseUrl',
      message: `mixed worlds: the policy is a real endpoint, ${policyText(policy)}, but the trainer is the SIMULATED sim cluster, ${trainerText}: the SIMULATED trainer would train on the real policy's rollouts and no real weights would change; set trainer.baseUrl to a Tinker-compatible trainer of ${policy.model}`,
    });
  }
  if (simulatedPolicy && !simulatedTrainer) {
    warnings.push({
      path: 'policy.baseUrl',
      message: `mixed worlds: the trainer is a real endpoint, ${trainer.baseUrl}, but the policy is the SIMULATED sim cluster, ${policyText(policy)}: the real trainer would be asked for a LoRA on the SIMULATED model; set policy.baseUrl and policy.model to the inference server of the model the trainer trains`,
    });
  }
  const learningRate = trainer.adam.learningRate;
  if (!simulatedTrainer && learningRate === SIM_LEARNING_RATE) {
    const given = rawValueAt(raw, 'trainer.adam.learningRate') === undefined ? ' (not set: the default)' : '';
    warnings.push({
      path: 'trainer.adam.learningRate',
      message: `is ${learningRate}${given}, the learning rate tuned for the SIMULATED trainer, but the trainer is a real endpoint, ${trainer.baseUrl}, training policy ${policyText(policy)}: set trainer.adam.learningRate for that model (the examples on real models use 1e-5)`,
    });
  }
  warnings.push(...envPolicyWarnings(config.env, policy, 'policy'));
  return warnings;
}

/** 1e-5 rather than 0.00001. */
const numberText = (n: number) => (n !== 0 && Math.abs(n) < 1e-3 ? n.toExponential() : String(n));

/** A URL fit to print: its password as ***. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.password) return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

/** The policy's endpoints (one per inference server), as a run or an evolution's executor uses them. */
export function policyEndpoints(policy: PolicyEndpoint, role: string, path: string): ConfigEndpoint[] {
  const simulated = isSimulatedPolicy(policy);
  const many = policy.inferenceServers !== undefined && policy.inferenceServers.length > 0;
  return policyUrls(policy).map((url, i) => ({
    role,
    path: many ? `${path}.inferenceServers.${i}` : `${path}.baseUrl`,
    address: url,
    model: policy.model,
    ...(policy.apiKeyEnv ? { apiKeyEnv: policy.apiKeyEnv } : {}),
    simulated,
  }));
}

/** Every endpoint a run config makes the run use, but its env's (the env's registration knows those: core/envs/endpoints.ts). */
export function runConfigEndpoints(config: RunConfig): ConfigEndpoint[] {
  const { trainer } = config;
  const simulatedTrainer = isSimClusterUrl(trainer.baseUrl);
  return [
    ...policyEndpoints(config.policy, 'policy', 'policy'),
    {
      role: 'trainer',
      path: 'trainer.baseUrl',
      address: trainer.baseUrl,
      ...(trainer.apiKeyEnv ? { apiKeyEnv: trainer.apiKeyEnv } : {}),
      simulated: simulatedTrainer,
      note: `Tinker API, LoRA rank ${trainer.loraRank}, learning rate ${numberText(trainer.adam.learningRate)}`,
    },
    ...(config.router.strategy === 'vote'
      ? config.router.voters.map((voter, i) => ({
          role: 'voter',
          path: `router.voters.${i}.baseUrl`,
          address: voter.baseUrl,
          model: voter.model,
          ...(voter.apiKeyEnv ? { apiKeyEnv: voter.apiKeyEnv } : {}),
          simulated: isSimClusterUrl(voter.baseUrl),
        }))
      : []),
    ...(config.tracking?.mlflow
      ? [
          {
            role: 'tracking',
            path: 'tracking.mlflow',
            address: "the control workers' $MLFLOW_TRACKING_URI",
            simulated: false,
            note: `MLflow experiment ${config.tracking.mlflow.experiment ?? config.name}`,
          },
        ]
      : []),
  ];
}
