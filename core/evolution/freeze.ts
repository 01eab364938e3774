/**
 * Freeze: the pool an evolution ends with, as a manifest and spec files
 * (core/harness/frozen-pool.ts). The pool is flat like a hand-written one:
 * each sibling's spec names the base as its parent, so any loader of the env
 * accepts it (the manifest lists it the same way); its evolutionary parent
 * and whole lineage, the round it was born in, its targets and its measured
 * effect are in the manifest's `measured`.
 */
import { contentHash, poolHash, type PoolManifest } from '../harness/frozen-pool';
import type { RepairDirection } from '../harness/direction';
import type { PoolEffect } from './effect-matrix';
import type { CandidateResult, FreshEffect } from './selection';

/** A candidate harness as the evolution store keeps it. */
export interface StoredCandidate {
  candidateId: string;
  round: number;
  direction: string;
  slot: number;
  parent: string;
  spec: Record<string, unknown>;
  version: string;
}

/** A sibling as frozen: its validation figures, and its effect on its targets measured afresh (what it is judged by). */
export type FrozenSibling = CandidateResult & FreshEffect & { validationRescueRate: number };

export interface FreezeRequest {
  evolutionId: string;
  siblings: FrozenSibling[];
  /** Each sibling's target cells, in words (`kind/failure type`). */
  targets: Record<string, string[]>;
  effect: PoolEffect;
}

/** The candidate's ancestors, oldest first (the base first), then itself. */
export function lineageOf(
  candidateId: string,
  candidates: readonly Pick<StoredCandidate, 'candidateId' | 'parent'>[],
  baseId: string,
): string[] {
  const chain = [candidateId];
  let current = candidates.find((c) => c.candidateId === candidateId);
  while (current && current.parent !== baseId) {
    chain.unshift(current.parent);
    current = candidates.find((c) => c.candidateId === current!.parent);
  }
  return [baseId, ...chain];
}

export function frozenPoolOf(args: {
  request: FreezeRequest;
  env: string;
  baseSpec: Record<string, unknown>;
  candidates: readonly StoredCandidate[];
  createdAt: string;
}): { manifest: PoolManifest; specs: Record<string, unknown> } {
  const baseId = String(args.baseSpec.id);
  const specs: Record<string, unknown> = { [baseId]: args.baseSpec };
  const members: PoolManifest['members'] = [
    {
      id: baseId,
      parent: null,
      direction: 'base',
      version: contentHash(args.baseSpec),
      file: `${baseId}.json`,
      targets: [],
      bornRound: 0,
      measured: null,
    },
  ];
  for (const result of args.request.siblings) {
    const candidate = args.candidates.find((c) => c.candidateId === result.candidateId);
    if (!candidate) throw new Error(`candidate ${result.candidateId} is not recorded`);
    // The description names where the sibling came from, so pools of two evolutions never share a hash (and so its figures).
    const description = `${String(candidate.spec.description)} [evolved by ${args.request.evolutionId}, round ${candidate.round}, from ${candidate.parent}]`;
    const spec = { ...candidate.spec, parent: baseId, description };
    specs[result.candidateId] = spec;
    members.push({
      id: result.candidateId,
      parent: baseId,
      direction: candidate.direction as RepairDirection,
      version: contentHash(spec),
      file: `${result.candidateId}.json`,
      targets: args.request.targets[result.candidateId] ?? [],
      bornRound: candidate.round,
      measured: {
        evolvedFrom: candidate.parent,
        lineage: lineageOf(candidate.candidateId, args.candidates, baseId),
        evolvedVersion: candidate.version,
        targetRescueRate: result.targetRescueRate,
        baseRateOnTargets: result.baseRateOnTargets,
        difference: result.difference,
        validationRescueRate: result.validationRescueRate,
        regressionRate: result.regressionRate,
        score: result.score,
        targetRollouts: result.targetRollouts,
        byKind: result.byKind,
      },
    });
  }
  const hash = poolHash(args.env, members);
  return {
    manifest: { hash, env: args.env, evolution: args.request.evolutionId, createdAt: args.createdAt, members, effect: args.request.effect },
    specs,
  };
}
