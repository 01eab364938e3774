/**
 * Proposals on DBBench against a scripted proposer server (a real
 * OpenAI-compatible HTTP server): a valid spec or patch becomes a candidate;
 * an invalid or off-direction answer goes back with the reason, up to the
 * retry bound, then the candidate is dropped with the reason recorded; every
 * attempt is in the store, and asking again replays it instead of asking the
 * proposer. The activities run in Temporal's mock activity environment over
 * the real run store.
 */
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createEvolutionActivities } from '../../activities/evolution';
import { createEnvironment } from '../../core/envs/registry';
import type { PreparedEvolution, ProposalOutcome } from '../../core/evolution/prepared';
import { RunStore } from '../../core/store/run-store';
import { TEST_DATABASE_URL } from './env';
import { startProposerServer, type ProposerServer } from './scripted-proposer-server';
import { silentLogger, uniqueRunId } from './stack';

const DATA = path.resolve(__dirname, '../../data/dbbench/dev.jsonl');
const fenced = (value: unknown) => `Here is my proposal.\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\``;

let store: RunStore;
let server: ProposerServer;
const environments = new Map<string, ReturnType<typeof createEnvironment>>();
const environmentFor = (config: { env: Parameters<typeof createEnvironment>[0] }) => {
  const key = JSON.stringify(config.env);
  if (!environments.has(key)) environments.set(key, createEnvironment(config.env));
  return environments.get(key)!;
};

beforeAll(async () => {
  store = RunStore.connect(TEST_DATABASE_URL);
  server = await startProposerServer({
    'patient-llm': [
      fenced({ patch: { turnHints: [{ when: 'sometimes', text: 'Check the schema.' }] } }),
      fenced({ patch: { budget: { extraTurns: 3 } } }),
      fenced({
        patch: {
          description: 'States the MySQL contract: backticks around names.',
          context: { append: ['Quote table and column names with backticks.'] },
        },
      }),
    ],
    'stubborn-llm': [
      fenced({ patch: { direction: 'procedural_skill', context: { append: ['A recipe.'] } } }),
      'I would add a hint about backticks.',
      '```json\n{"spec": {oops}\n```',
    ],
    'locked-llm': [{ status: 401, error: 'invalid API key' }],
  });
});
afterAll(async () => {
  await Promise.all([...environments.values()].map((env) => env.close?.()));
  await server?.close();
  await store?.close();
});

async function prepare(proposers: string[]) {
  const activities = createEvolutionActivities({ store, logger: silentLogger, environmentFor });
  const env = new MockActivityEnvironment();
  const prepared: PreparedEvolution = await env.run(activities.prepareEvolution, {
    config: {
      name: uniqueRunId('dbbench-evolve'),
      env: { kind: 'dbbench', data: DATA },
      proposers: proposers.map((model) => ({ baseUrl: server.baseUrl, model })),
      directions: ['environment_contract'],
      proposalRetries: 2,
    },
  });
  const propose = (slot: number): Promise<ProposalOutcome> =>
    new MockActivityEnvironment().run(activities.proposeCandidate, {
      evolutionId: prepared.evolutionId,
      round: 1,
      direction: 'environment_contract' as const,
      slot,
      parentId: prepared.baseId,
      parentResults: null,
      targetTaskIds: [],
    });
  return { prepared, propose };
}

test('an invalid then an off-direction answer go back with their reasons, and the third, a valid patch, becomes the candidate', async () => {
  const { prepared, propose } = await prepare(['patient-llm']);
  const outcome = await propose(1);
  expect(outcome).toMatchObject({
    status: 'accepted',
    attempts: 3,
    candidate: { candidateId: 'ec-r1-c1', parent: 'base', direction: 'environment_contract' },
  });

  const proposals = await store.evolutions.proposals(prepared.evolutionId);
  expect(proposals.map((p) => p.verdict)).toEqual(['invalid', 'off_direction', 'accepted']);
  expect(proposals[0].reason).toContain('turnHints');
  expect(proposals[1].reason).toContain('budget.extraTurns');
  const asked = server.requests.filter((r) => r.model === 'patient-llm');
  const retry = asked[2].messages;
  expect(retry[retry.length - 1].content).toMatch(/^Your answer was refused: it changes budget\.extraTurns/);
  expect(asked[0].messages[1].content).toContain('```json proposal-request');

  const candidate = await store.evolutions.getCandidate(prepared.evolutionId, 'ec-r1-c1');
  expect(candidate?.spec).toMatchObject({
    id: 'ec-r1-c1',
    parent: 'base',
    env: 'dbbench',
    direction: 'environment_contract',
    context: { append: ['Quote table and column names with backticks.'] },
  });
});

test('asking for a recorded candidate again replays the store and asks no proposer', async () => {
  const { propose } = await prepare(['patient-llm']);
  await propose(1);
  const asked = server.requests.length;
  await expect(propose(1)).resolves.toMatchObject({ status: 'accepted', candidate: { candidateId: 'ec-r1-c1' } });
  expect(server.requests.length).toBe(asked);
});

test('a proposer refused on every attempt drops the candidate with the last reason, each attempt recorded', async () => {
  const { prepared, propose } = await prepare(['patient-llm', 'stubborn-llm']);
  const outcome = await propose(2);
  expect(outcome).toMatchObject({ status: 'dropped', slot: 2, attempts: 3 });
  expect(outcome.status === 'dropped' && outcome.reason).toMatch(/refused 3 times; last: the last ```json block is not valid JSON/);
  const proposals = await store.evolutions.proposals(prepared.evolutionId, { slot: 2 });
  expect(proposals.map((p) => [p.verdict, p.proposer.split('@')[0]])).toEqual([
    ['off_direction', 'stubborn-llm'],
    ['invalid', 'stubborn-llm'],
    ['invalid', 'stubborn-llm'],
  ]);
  expect(proposals[0].reason).toContain("direction is 'procedural_skill', but this candidate must be 'environment_contract'");
  expect(proposals[1].reason).toBe('the answer holds no ```json block');
  expect(await store.evolutions.getCandidate(prepared.evolutionId, 'ec-r1-c2')).toBeNull();
});

test('a proposer that refuses the request (HTTP 401) fails at once, naming the proposer and its key setting', async () => {
  const { propose } = await prepare(['locked-llm']);
  await expect(propose(1)).rejects.toThrow(
    /proposer proposers\.0 \(locked-llm@.*\) refused the request: HTTP 401.*check proposers\.0\.apiKeyEnv/,
  );
});
