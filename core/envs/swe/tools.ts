/**
 * The SWE agent's tools, as OpenHands and SWE-agent give them: a shell
 * (`execute_bash`), a file editor (`str_replace_editor`: view, create,
 * str_replace, insert, undo_edit) and `submit`. The shell runs in the
 * sandbox; the editor works on the workspace's files from the worker, and
 * refuses any path (or symlink) that leads outside /workspace.
 */
import { realpathSync, type Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ToolDefinition } from '../../policy/trajectory';
import { formatZodError } from '../../zod-errors';
import { SANDBOX_UID, WORKSPACE } from './sandbox';

export const TOOLS: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'execute_bash',
      description:
        'Run a bash command in the repository at /workspace (a sandbox: no network, nothing installs). ' +
        'Each call is a fresh shell: state such as `cd` or background processes does not carry over. ' +
        'Long outputs are cut; redirect them to a file and look at parts of it.',
      parameters: {
        type: 'object',
        properties: {
          command: { type: 'string', description: 'The command, e.g. `python -m pytest -q tests/test_x.py`.' },
          timeout: { type: 'integer', description: 'Seconds before the command is killed (default 120, at most 600).' },
        },
        required: ['command'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'str_replace_editor',
      description:
        'View, create and edit files under /workspace. `view` shows a file with line numbers (or lists a folder two levels deep); ' +
        '`create` writes a new file; `str_replace` replaces `old_str`, which must occur exactly once, with `new_str`; ' +
        '`insert` puts `new_str` after line `insert_line` (0: at the top); `undo_edit` reverts the last edit of a file.',
      parameters: {
        type: 'object',
        properties: {
          command: { type: 'string', enum: ['view', 'create', 'str_replace', 'insert', 'undo_edit'] },
          path: { type: 'string', description: 'Absolute path, under /workspace.' },
          file_text: { type: 'string', description: 'create: the file content.' },
          old_str: { type: 'string', description: 'str_replace: the exact text to replace.' },
          new_str: { type: 'string', description: 'str_replace, insert: the new text.' },
          insert_line: { type: 'integer', description: 'insert: the line after which new_str goes.' },
          view_range: { type: 'array', items: { type: 'integer' }, description: 'view: [first, last] line (last -1: to the end).' },
        },
        required: ['command', 'path'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'submit',
      description: 'Finish: the changes in /workspace (its git diff) are your answer. Call it once the issue is fixed.',
      parameters: { type: 'object', properties: {} },
    },
  },
];

const ExecuteBash = z.strictObject({ command: z.string().min(1), timeout: z.number().int().positive().max(600).optional() });
const Editor = z.discriminatedUnion('command', [
  z.strictObject({ command: z.literal('view'), path: z.string(), view_range: z.tuple([z.number().int(), z.number().int()]).optional() }),
  z.strictObject({ command: z.literal('create'), path: z.string(), file_text: z.string() }),
  z.strictObject({ command: z.literal('str_replace'), path: z.string(), old_str: z.string().min(1), new_str: z.string().default('') }),
  z.strictObject({ command: z.literal('insert'), path: z.string(), insert_line: z.number().int().min(0), new_str: z.string() }),
  z.strictObject({ command: z.literal('undo_edit'), path: z.string() }),
]);
export type EditorCommand = z.infer<typeof Editor>;

export type SweAction =
  | { tool: 'execute_bash'; arguments: z.infer<typeof ExecuteBash> }
  | { tool: 'str_replace_editor'; arguments: EditorCommand }
  | { tool: 'submit'; arguments: Record<string, never> };

const ActionText = z.object({ tool: z.string(), arguments: z.unknown() });

/** The action text (`{"tool", "arguments"}`, from a tool call) as an action, or what is wrong with it. */
export function parseSweAction(text: string): { ok: true; action: SweAction } | { ok: false; error: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, error: 'no tool call: call one of execute_bash, str_replace_editor, submit' };
  }
  const shape = ActionText.safeParse(raw);
  if (!shape.success) return { ok: false, error: 'no tool call: call one of execute_bash, str_replace_editor, submit' };
  const { tool } = shape.data;
  const args = shape.data.arguments ?? {};
  if (typeof args === 'string') return { ok: false, error: `${tool}: the arguments are not a JSON object: ${args.slice(0, 200)}` };
  const check = <T>(schema: z.ZodType<T>) => {
    const parsed = schema.safeParse(args);
    return parsed.success
      ? { ok: true as const, value: parsed.data }
      : { ok: false as const, error: `${tool}: bad arguments:\n${formatZodError(parsed.error)}` };
  };
  switch (tool) {
    case 'execute_bash': {
      const c = check(ExecuteBash);
      return c.ok ? { ok: true, action: { tool, arguments: c.value } } : c;
    }
    case 'str_replace_editor': {
      const c = check(Editor);
      return c.ok ? { ok: true, action: { tool, arguments: c.value } } : c;
    }
    case 'submit':
      return { ok: true, action: { tool, arguments: {} } };
    default:
      return { ok: false, error: `no tool named '${tool}': call one of execute_bash, str_replace_editor, submit` };
  }
}

export class EditorError extends Error {}

/** Lines shown by `view` at most; longer files need a view_range. */
const VIEW_LINES = 400;

/** Entries read from one folder for a listing at most: a folder of a million files is not read whole. */
const FOLDER_ENTRIES_READ = 10_000;

/** Files the editor reads at most (a larger one is for the shell: head, sed -n). */
const MAX_FILE_BYTES = 4 * 1024 * 1024;

/** What the editor returns at most when not told: the shell's observation cap. */
export const DEFAULT_EDITOR_OUTPUT_BYTES = 16 * 1024;

/** `text` cut to `maxBytes` of UTF-8, with a note of what was left out and where to look instead. */
export function capOutput(text: string, maxBytes: number): string {
  const bytes = Buffer.byteLength(text);
  if (bytes <= maxBytes) return text;
  // A character cut in two at the end is dropped, not shown as garbage.
  const kept = Buffer.from(text)
    .subarray(0, maxBytes)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
  return `${kept}\n[output cut: ${bytes} bytes in all, the first ${maxBytes} shown; view a line range or a subfolder, or use execute_bash]`;
}

/**
 * The editor, on the host folder mounted at /workspace. Every path is
 * resolved (symlinks included) and must stay inside the workspace; files it
 * writes are given to the sandbox user, so the agent's shell can change them.
 * It runs in the worker, so all its file-system work is asynchronous and its
 * output capped: a view of a huge folder or file holds up neither the
 * worker's event loop nor the model's context.
 */
export class FileEditor {
  private readonly history = new Map<string, string[]>();
  private readonly root: string;

  constructor(
    hostRoot: string,
    private readonly maxOutputBytes = DEFAULT_EDITOR_OUTPUT_BYTES,
  ) {
    this.root = realpathSync(hostRoot);
  }

  /** One editor command; what goes wrong (a missing file, a path through a file, a permission) comes back as an EditorError naming the path. */
  async run(command: EditorCommand): Promise<string> {
    try {
      return capOutput(await this.runChecked(command), this.maxOutputBytes);
    } catch (err) {
      if (err instanceof EditorError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code)
        throw new EditorError(
          `${command.path}: ${code === 'ENOTDIR' ? 'a part of the path is a file, not a folder' : code === 'EACCES' || code === 'EPERM' ? 'permission denied' : code === 'EISDIR' ? 'is a folder' : code}`,
        );
      throw err;
    }
  }

  private async runChecked(command: EditorCommand): Promise<string> {
    const file = await this.resolve(command.path);
    switch (command.command) {
      case 'view':
        return this.view(command.path, file, command.view_range);
      case 'create': {
        if (await exists(file)) throw new EditorError(`${command.path} already exists; use str_replace to change it`);
        await this.ensureParent(file);
        await this.write(file, command.file_text);
        return `File created: ${command.path}`;
      }
      case 'str_replace': {
        const text = await this.read(command.path, file);
        const count = text.split(command.old_str).length - 1;
        if (count === 0) throw new EditorError(`old_str does not occur in ${command.path}: nothing replaced`);
        if (count > 1) throw new EditorError(`old_str occurs ${count} times in ${command.path}: make it unique (include more lines)`);
        this.remember(file, text);
        const updated = text.replace(command.old_str, () => command.new_str);
        await this.write(file, updated);
        const at = updated.indexOf(command.new_str);
        return `The file ${command.path} has been edited. ${this.snippet(updated, updated.slice(0, at).split('\n').length, command.new_str.split('\n').length)}`;
      }
      case 'insert': {
        const text = await this.read(command.path, file);
        const lines = text.split('\n');
        if (command.insert_line > lines.length)
          throw new EditorError(`insert_line ${command.insert_line} is past the end of ${command.path} (${lines.length} lines)`);
        this.remember(file, text);
        const updated = [...lines.slice(0, command.insert_line), ...command.new_str.split('\n'), ...lines.slice(command.insert_line)].join(
          '\n',
        );
        await this.write(file, updated);
        return `The file ${command.path} has been edited. ${this.snippet(updated, command.insert_line + 1, command.new_str.split('\n').length)}`;
      }
      case 'undo_edit': {
        const previous = this.history.get(file)?.pop();
        if (previous === undefined) throw new EditorError(`no edit of ${command.path} to undo`);
        await this.write(file, previous);
        return `Last edit of ${command.path} undone.`;
      }
    }
  }

  /** The host path of a /workspace path; refused when it (or a symlink on the way) leads outside. */
  async resolve(requested: string): Promise<string> {
    if (!path.posix.isAbsolute(requested)) throw new EditorError(`${requested}: give an absolute path under ${WORKSPACE}`);
    const normalized = path.posix.normalize(requested);
    if (normalized !== WORKSPACE && !normalized.startsWith(`${WORKSPACE}/`)) throw new EditorError(`${requested} is outside ${WORKSPACE}`);
    const host = path.join(this.root, normalized.slice(WORKSPACE.length));
    // The deepest part that exists, resolved, must be inside the workspace.
    let existing = host;
    while (!(await exists(existing))) existing = path.dirname(existing);
    let real: string;
    try {
      real = await fs.realpath(existing);
    } catch {
      throw new EditorError(`${requested} is a symlink that leads nowhere`);
    }
    if (real !== this.root && !real.startsWith(`${this.root}/`)) throw new EditorError(`${requested} leads outside ${WORKSPACE}`);
    return path.join(real, path.relative(existing, host));
  }

  private async view(shown: string, file: string, range?: [number, number]): Promise<string> {
    if (!(await exists(file))) throw new EditorError(`${shown} does not exist`);
    if ((await fs.stat(file)).isDirectory()) return this.listing(shown, file);
    const lines = (await this.read(shown, file)).split('\n');
    const first = range ? Math.max(1, range[0]) : 1;
    const last = range ? (range[1] === -1 ? lines.length : Math.min(range[1], lines.length)) : Math.min(lines.length, VIEW_LINES);
    if (range && first > last) throw new EditorError(`view_range [${range[0]}, ${range[1]}] is empty: ${shown} has ${lines.length} lines`);
    const body = lines
      .slice(first - 1, last)
      .map((line, i) => `${String(first + i).padStart(6)}\t${line}`)
      .join('\n');
    const more = !range && lines.length > VIEW_LINES ? `\n[${lines.length - VIEW_LINES} more lines: give a view_range]` : '';
    return `Here's the result of running \`cat -n\` on ${shown}:\n${body}${more}`;
  }

  /** A folder two levels deep, hidden entries left out; the walk stops once the listing is over the output cap. */
  private async listing(shown: string, folder: string): Promise<string> {
    const entries: string[] = [];
    const notes: string[] = [];
    let bytes = 0;
    // Room is left for the notes, so the cap does not cut them off.
    const full = () => bytes > this.maxOutputBytes - 1024;
    const walk = async (dir: string, depth: number): Promise<void> => {
      const { children, more } = await readFolder(dir);
      const where = path.posix.join(shown, path.relative(folder, dir));
      if (more) notes.push(`[${where} has over ${FOLDER_ENTRIES_READ} entries: only some are listed; use execute_bash (ls, find)]`);
      for (const child of children) {
        if (full()) return;
        if (child.name.startsWith('.')) continue;
        const host = path.join(dir, child.name);
        const isDir = child.isDirectory() || (isUnknownType(child) && (await fs.lstat(host)).isDirectory());
        const entry = `${path.posix.join(where, child.name)}${isDir ? '/' : ''}`;
        entries.push(entry);
        bytes += entry.length + 1;
        if (isDir && depth < 2) await walk(host, depth + 1);
      }
    };
    await walk(folder, 1);
    if (full()) notes.push(`[listing cut at ${bytes} bytes: view a subfolder, or use execute_bash (ls, find)]`);
    return [`Files and folders in ${shown}, two levels deep (hidden ones left out):`, ...entries, ...notes].join('\n');
  }

  private snippet(text: string, line: number, count: number): string {
    const lines = text.split('\n');
    const first = Math.max(1, line - 4);
    const last = Math.min(lines.length, line + count + 3);
    const body = lines
      .slice(first - 1, last)
      .map((l, i) => `${String(first + i).padStart(6)}\t${l}`)
      .join('\n');
    return `Here's the result of running \`cat -n\` on a snippet of it:\n${body}\nReview the change and edit again if needed.`;
  }

  /** Regular files only: a pipe or a device would never end. */
  private async read(shown: string, file: string): Promise<string> {
    if (!(await exists(file))) throw new EditorError(`${shown} does not exist`);
    const stat = await fs.stat(file);
    if (stat.isDirectory()) throw new EditorError(`${shown} is a folder`);
    if (!stat.isFile()) throw new EditorError(`${shown} is not a regular file (a pipe, socket or device): look at it with execute_bash`);
    if (stat.size > MAX_FILE_BYTES) throw new EditorError(`${shown} is over 4 MB: look at it with execute_bash`);
    return fs.readFile(file, 'utf8');
  }

  private remember(file: string, text: string): void {
    const stack = this.history.get(file) ?? [];
    stack.push(text);
    this.history.set(file, stack);
  }

  private async ensureParent(file: string): Promise<void> {
    const parent = path.dirname(file);
    if (await exists(parent)) return;
    await fs.mkdir(parent, { recursive: true });
    for (let dir = parent; dir !== this.root && dir.startsWith(this.root); dir = path.dirname(dir)) await giveToSandboxUser(dir);
  }

  private async write(file: string, text: string): Promise<void> {
    if ((await exists(file)) && !(await fs.stat(file)).isFile())
      throw new EditorError(`${WORKSPACE}${file.slice(this.root.length)}: not a regular file`);
    await fs.writeFile(file, text);
    await giveToSandboxUser(file);
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** A file system that does not say an entry's type in the folder (d_type): it needs an lstat. */
const isUnknownType = (d: Dirent) =>
  !d.isFile() && !d.isDirectory() && !d.isSymbolicLink() && !d.isFIFO() && !d.isSocket() && !d.isCharacterDevice() && !d.isBlockDevice();

/** A folder's entries, sorted, at most FOLDER_ENTRIES_READ of them read; `more` when there were others. */
async function readFolder(dir: string): Promise<{ children: Dirent[]; more: boolean }> {
  const children: Dirent[] = [];
  let more = false;
  for await (const child of await fs.opendir(dir, { bufferSize: 256 })) {
    if (children.length === FOLDER_ENTRIES_READ) {
      more = true;
      break;
    }
    children.push(child);
  }
  return { children: children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)), more };
}

async function giveToSandboxUser(p: string): Promise<void> {
  if (process.getuid?.() === 0) await fs.chown(p, SANDBOX_UID, SANDBOX_UID);
}
