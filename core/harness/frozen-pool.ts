/**
 * Frozen harness pools: a pool written once into `<poolsRoot>/<poolHash>/`
 * and never changed, so a run config can name it by its hash (`env.pool`)
 * and a run's record says exactly which harnesses it trained with.
 *
 * The folder holds one `<id>.json` per harness (the env's own spec format:
 * a sim `SimHarness`, a `HarnessSpec` elsewhere) and `pool-manifest.json`.
 * Every member's version is the content hash of its spec, and the pool's hash
 * is a hash of the env and the (id, version) pairs: reading a pool recomputes
 * both, so a spec edited after freezing, a missing file or a folder under the
 * wrong name is refused instead of silently training with other harnesses.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { poolsDirSetting } from '../config';
import { UserError } from '../errors';
import { formatZodError } from '../zod-errors';
import { RepairDirection } from './direction';
import { basePoolIssue } from './pool';

/** The manifest of a frozen pool folder; it is not a harness, so spec loaders skip it. */
export const POOL_MANIFEST_FILE = 'pool-manifest.json';

export class FrozenPoolError extends UserError {
  override name = 'FrozenPoolError';
}

/** JSON with every object's keys sorted (recursively), arrays kept in order: equal content, equal text. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => a.localeCompare(b)))
      : inner,
  );
}

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** The version of a harness spec: sha256 of its canonical JSON, first 12 hex characters. */
export function contentHash(value: unknown): string {
  return sha256Hex(canonicalJson(value)).slice(0, 12);
}

/** A pool's hash: sha256 of the canonical `{env, members: [[id, version], ...]}` (sorted by id), first 16 hex characters. */
export function poolHash(env: string, members: ReadonlyArray<{ id: string; version: string }>): string {
  const pairs = [...members].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((m) => [m.id, m.version]);
  return sha256Hex(canonicalJson({ env, members: pairs })).slice(0, 16);
}

/** The pool hash of an env's harnesses (to record which pool a run trained with); every harness needs a version. */
export function poolHashOfHarnesses(env: string, harnesses: ReadonlyArray<{ id: string; version?: string }>): string {
  const unversioned = harnesses.filter((h) => h.version === undefined).map((h) => h.id);
  if (unversioned.length > 0)
    throw new Error(`harnesses of env ${env} without a version cannot be hashed into a pool: ${unversioned.join(', ')}`);
  return poolHash(
    env,
    harnesses.map((h) => ({ id: h.id, version: h.version! })),
  );
}

/** Where frozen pools are kept: $HARNESS_S_POOLS_DIR, else .data/pools under the working directory, absolute. */
export function poolsRoot(): string {
  return path.resolve(poolsDirSetting());
}

const HarnessId = z.string().regex(/^[a-z][a-z0-9_-]*$/, 'use lower-case letters, digits, - and _');
const Hex = (length: number) => z.string().regex(new RegExp(`^[0-9a-f]{${length}}$`), `${length} lower-case hex characters`);

export const FrozenPoolMember = z.strictObject({
  id: HarnessId,
  parent: HarnessId.nullable(),
  direction: RepairDirection,
  /** contentHash of the spec in `file`. */
  version: Hex(12),
  /** Always `<id>.json`, in the pool's folder. */
  file: z.string(),
  /** The failures it is aimed at, in words, e.g. "lookup/wrong_answer". */
  targets: z.array(z.string()),
  /** The evolution round it was born in; 0 for the base. */
  bornRound: z.number().int().min(0),
  /** The evolution's figures for this harness (its own format), null for a hand-written one. */
  measured: z.unknown(),
});
export type FrozenPoolMember = z.infer<typeof FrozenPoolMember>;

export const PoolManifest = z
  .strictObject({
    hash: Hex(16),
    env: z.string().min(1),
    /** The evolution that made the pool; null for a pool frozen by hand. */
    evolution: z.string().nullable(),
    createdAt: z.iso.datetime({ offset: true }),
    /** Base first. */
    members: z.array(FrozenPoolMember).min(1),
    /** The pool-level effect matrix (the evolution's format), null when unknown. */
    effect: z.unknown(),
  })
  .superRefine((manifest, ctx) => {
    const ids = new Set<string>();
    manifest.members.forEach((member, i) => {
      if (ids.has(member.id)) ctx.addIssue({ code: 'custom', path: ['members', i, 'id'], message: `duplicate harness id '${member.id}'` });
      ids.add(member.id);
      if (member.file !== `${member.id}.json`) {
        ctx.addIssue({
          code: 'custom',
          path: ['members', i, 'file'],
          message: `must be '${member.id}.json' (a member's file is named by its id)`,
        });
      }
    });
    manifest.members.forEach((member, i) => {
      if (member.parent !== null && !ids.has(member.parent)) {
        ctx.addIssue({ code: 'custom', path: ['members', i, 'parent'], message: `'${member.parent}' is not in the pool` });
      }
    });
    const issue = basePoolIssue(manifest.members);
    if (issue) ctx.addIssue({ code: 'custom', path: ['members'], message: issue });
    else if (manifest.members[0].direction !== 'base')
      ctx.addIssue({ code: 'custom', path: ['members'], message: 'list the base harness first' });
  });
export type PoolManifest = z.infer<typeof PoolManifest>;

export interface FrozenPool {
  manifest: PoolManifest;
  /** Each member's spec as frozen (the env's format, not yet validated by it), by id. */
  specs: Record<string, unknown>;
  dir: string;
}

const prettyJson = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** What is wrong with a manifest and its specs before they are frozen, or null. */
function unfreezableReason(manifest: PoolManifest, specs: Record<string, unknown>): string | null {
  const ids = manifest.members.map((m) => m.id);
  const extra = Object.keys(specs).filter((id) => !ids.includes(id));
  if (extra.length > 0) return `specs of harnesses the manifest does not list: ${extra.join(', ')}`;
  for (const member of manifest.members) {
    if (!(member.id in specs)) return `no spec for member '${member.id}'`;
    const version = contentHash(specs[member.id]);
    if (version !== member.version)
      return `member '${member.id}' has version ${member.version} in the manifest, but its spec hashes to ${version}`;
  }
  const hash = poolHash(manifest.env, manifest.members);
  return hash === manifest.hash ? null : `the manifest's hash is ${manifest.hash}, but its env and members hash to ${hash}`;
}

/**
 * Freezes a pool into `<root>/<manifest.hash>/` and returns that folder. The
 * files are written into a temporary folder beside it and renamed into place,
 * so no reader ever sees half a pool. A pool that is already there (frozen
 * before, or by a concurrent writer) is verified and left as it is; a folder
 * under that hash that does not verify is refused.
 */
export function writeFrozenPool(root: string, manifest: PoolManifest, specs: Record<string, unknown>): string {
  const parsed = PoolManifest.safeParse(manifest);
  if (!parsed.success)
    throw new FrozenPoolError(`cannot freeze pool ${manifest.hash}: its manifest is invalid:\n${formatZodError(parsed.error)}`);
  const reason = unfreezableReason(parsed.data, specs);
  if (reason) throw new FrozenPoolError(`cannot freeze pool ${manifest.hash}: ${reason}`);
  const dir = path.join(path.resolve(root), parsed.data.hash);
  if (existsSync(dir)) return keepFrozenPool(dir, parsed.data.hash);

  mkdirSync(path.dirname(dir), { recursive: true });
  const staging = mkdtempSync(path.join(path.dirname(dir), `.${parsed.data.hash}.writing-`));
  try {
    for (const member of parsed.data.members) writeFileSync(path.join(staging, member.file), prettyJson(specs[member.id]));
    writeFileSync(path.join(staging, POOL_MANIFEST_FILE), prettyJson(parsed.data));
    renameSync(staging, dir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    // Another writer renamed the same pool into place first: theirs stands if it verifies.
    if (existsSync(dir)) return keepFrozenPool(dir, parsed.data.hash);
    throw err;
  }
  return dir;
}

/** Where frozen pools are also kept, whatever host froze them: the run store's harness_pools (EvolutionStore). */
export interface StoredFrozenPools {
  getPool(poolHash: string): Promise<{ manifest: unknown; specs: Record<string, unknown> } | null>;
}

/**
 * The folder of frozen pool `hash` under `root`. A host that lacks it (the
 * pool was frozen on another host) writes it from the run store, as freezing
 * does (staged, then renamed into place, and verified against its hash), so
 * the sync readers find it. A folder already there is left as it is (it is
 * verified when read). A pool in neither place is refused, naming both.
 */
export async function ensureFrozenPoolFolder(root: string, hash: string, stored: StoredFrozenPools): Promise<string> {
  const dir = path.join(path.resolve(root), hash);
  if (existsSync(dir)) return dir;
  const pool = await stored.getPool(hash);
  if (!pool) {
    throw new FrozenPoolError(
      `no frozen pool ${hash}: it is neither in this host's pools folder (${dir}; $HARNESS_S_POOLS_DIR sets the folder, now ${path.resolve(root)}) ` +
        'nor in the run store (harness_pools, where `harness-s pool evolve` keeps every pool it freezes; `harness-s pool list` lists them)',
    );
  }
  const manifest = PoolManifest.safeParse(pool.manifest);
  if (!manifest.success)
    throw new FrozenPoolError(
      `frozen pool ${hash} in the run store has an invalid manifest:\n${formatZodError(manifest.error, PoolManifest)}`,
    );
  if (manifest.data.hash !== hash)
    throw new FrozenPoolError(`the run store keeps pool ${manifest.data.hash} under hash ${hash}; it is not written to ${dir}`);
  try {
    return writeFrozenPool(root, manifest.data, pool.specs);
  } catch (err) {
    throw new FrozenPoolError(`frozen pool ${hash} from the run store cannot be written to ${dir}: ${(err as Error).message}`);
  }
}

function keepFrozenPool(dir: string, hash: string): string {
  try {
    readFrozenPool(dir, hash);
  } catch (err) {
    throw new FrozenPoolError(`cannot freeze pool ${hash}: ${dir} already exists and holds something else: ${(err as Error).message}`);
  }
  return dir;
}

/**
 * Reads a frozen pool folder and verifies it: every member file's content
 * hash against the manifest, the pool hash against the manifest, the folder's
 * name and `expectedHash`. Any mismatch is refused, naming the file and both hashes.
 */
export function readFrozenPool(dir: string, expectedHash?: string): FrozenPool {
  const manifestFile = path.join(dir, POOL_MANIFEST_FILE);
  const manifest = readManifest(manifestFile);
  const specs: Record<string, unknown> = {};
  for (const member of manifest.members) {
    const file = path.join(dir, member.file);
    if (!existsSync(file)) {
      throw new FrozenPoolError(
        `frozen pool ${dir}: ${file} was removed after the pool was frozen (the manifest, ${manifestFile}, records version ${member.version} for '${member.id}')`,
      );
    }
    const spec = readJson(file, 'harness spec');
    const version = contentHash(spec);
    if (version !== member.version) {
      throw new FrozenPoolError(
        `frozen pool ${dir}: ${file} was changed after the pool was frozen: its content hash is ${version}, the manifest (${manifestFile}) records ${member.version}`,
      );
    }
    specs[member.id] = spec;
  }
  const strays = readdirSync(dir).filter(
    (f) => /\.(json|ya?ml)$/i.test(f) && f !== POOL_MANIFEST_FILE && !manifest.members.some((m) => m.file === f),
  );
  if (strays.length > 0)
    throw new FrozenPoolError(
      `frozen pool ${dir}: ${strays.join(', ')} ${strays.length === 1 ? 'was' : 'were'} added after the pool was frozen (the manifest does not list them)`,
    );
  const computed = poolHash(manifest.env, manifest.members);
  if (computed !== manifest.hash) {
    throw new FrozenPoolError(
      `frozen pool ${dir}: ${manifestFile} was changed after the pool was frozen: its members hash to ${computed}, its hash field says ${manifest.hash}`,
    );
  }
  if (path.basename(dir) !== manifest.hash) {
    throw new FrozenPoolError(
      `frozen pool ${dir}: the folder is named ${path.basename(dir)}, but ${manifestFile} holds pool ${manifest.hash}`,
    );
  }
  if (expectedHash !== undefined && expectedHash !== manifest.hash) {
    throw new FrozenPoolError(`frozen pool ${dir}: pool ${expectedHash} was asked for, but ${manifestFile} holds pool ${manifest.hash}`);
  }
  return { manifest, specs, dir };
}

function readManifest(file: string): PoolManifest {
  const parsed = PoolManifest.safeParse(readJson(file, 'pool manifest'));
  if (!parsed.success) throw new FrozenPoolError(`pool manifest ${file} is invalid:\n${formatZodError(parsed.error, PoolManifest)}`);
  return parsed.data;
}

function readJson(file: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new FrozenPoolError(`${what} ${file}: cannot read it: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new FrozenPoolError(`${what} ${file}: cannot parse it as JSON: ${(err as Error).message}`);
  }
}

/**
 * Each harness as the env reads it must have the version it was frozen with,
 * so a run's recorded pool hash is the hash of the folder it named: a spec
 * frozen without the defaults its env fills in would read as another version.
 */
export function checkFrozenVersions(frozen: FrozenPool, harnesses: ReadonlyArray<{ id: string; version?: string }>): void {
  for (const member of frozen.manifest.members) {
    const file = path.join(frozen.dir, member.file);
    const harness = harnesses.find((h) => h.id === member.id);
    if (!harness)
      throw new FrozenPoolError(
        `frozen pool ${frozen.manifest.hash}: ${file} does not define harness '${member.id}', the id its manifest lists it under`,
      );
    if (harness.version !== member.version) {
      throw new FrozenPoolError(
        `frozen pool ${frozen.manifest.hash}: ${file} reads as version ${harness.version ?? '(none)'}, but was frozen as ${member.version}: ` +
          'a pool must be frozen with each spec as its env parses it (every default filled in)',
      );
    }
  }
}
