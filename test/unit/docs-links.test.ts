/**
 * The documentation's links: every relative link and every anchor in
 * README.md, CHANGELOG.md and docs/**\/*.md must resolve. A file link must
 * name a file or folder of the repository; an anchor (`#heading`) must match
 * a heading of its Markdown file as GitHub makes its id: lower case, spaces
 * to '-', punctuation dropped, a repeated heading's id suffixed -1, -2, ...
 * External links (http:, https:, mailto:) are not followed. Links inside code
 * (fenced blocks, inline spans) are not links.
 *
 * Also the front door: README.md is short, and shows both quick-start
 * commands on its first screen.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

/** What the checker may ask of the repository; paths are relative to its root, with '/'. */
interface Repo {
  exists(file: string): boolean;
  /** A Markdown file's text, or undefined when it is not a file. */
  read(file: string): string | undefined;
}

/** GitHub's id for a heading's text (as github-slugger makes it). */
function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** A heading's text as rendered: code spans kept as their content, links as their text, emphasis and tags dropped. */
function headingText(raw: string): string {
  const parts = raw.split(/(`+[^`]*`+)/);
  return parts
    .map((part) => {
      if (part.startsWith('`')) return part.replace(/^`+|`+$/g, '');
      return part
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
        .replace(/<[^>]+>/g, '')
        .replace(/\\(.)/g, '$1')
        .replace(/(^|[^\p{L}\p{N}])[*_]+(?=\S)/gu, '$1')
        .replace(/(?<=\S)[*_]+(?=[^\p{L}\p{N}]|$)/gu, '');
    })
    .join('')
    .trim();
}

/** The text with fenced code blocks blanked (line count kept) and inline code spans removed. */
function withoutCode(markdown: string): string {
  // A code span: a run of backticks, then anything up to the same run, within one paragraph.
  return withoutCodeFences(markdown).replace(/(`+)(?:(?!\n[ \t]*\n)[\s\S])*?\1/g, (span) => span.replace(/[^\n]/g, ' '));
}

/** The anchors a Markdown file has: its headings' ids, with GitHub's suffixes for repeats, and explicit HTML ids. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutCodeFences(markdown).split('\n')) {
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (heading) {
      const base = slug(headingText(heading[1]));
      let id = base;
      let n = seen.get(base) ?? 0;
      while (anchors.has(id)) id = `${base}-${++n}`;
      seen.set(base, n);
      anchors.add(id);
    }
    for (const m of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** Fenced code blanked, inline code left as it is (a heading's code span is part of its id). */
function withoutCodeFences(markdown: string): string {
  let fence: string | null = null;
  return markdown
    .split('\n')
    .map((line) => {
      // A backtick fence's info string has no backtick: "```` ```json ```` block" is a code span.
      const opener = /^ {0,3}(`{3,}(?!.*`)|~{3,})/.exec(line);
      if (fence === null) {
        if (!opener) return line;
        fence = opener[1];
        return '';
      }
      if (opener && opener[1][0] === fence[0] && opener[1].length >= fence.length && line.trim() === opener[1]) fence = null;
      return '';
    })
    .join('\n');
}

/** Every link of a Markdown file that does not resolve, as `file:line: target: why`. */
function brokenLinks(file: string, markdown: string, repo: Repo): string[] {
  const text = withoutCode(markdown);
  const lineOf = (index: number) => text.slice(0, index).split('\n').length;
  const links: { target: string; at: number }[] = [];
  for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g))
    links.push({ target: m[1], at: m.index });
  for (const m of text.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) links.push({ target: m[1], at: m.index });
  for (const m of text.matchAll(/\bhref="([^"]*)"/g)) links.push({ target: m[1], at: m.index });

  const problems: string[] = [];
  for (const { target, at } of links) {
    const report = (why: string) => problems.push(`${file}:${lineOf(at)}: ${target || '(empty)'}: ${why}`);
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    if (target === '') {
      report('empty link');
      continue;
    }
    const hash = target.indexOf('#');
    const filePart = hash < 0 ? target : target.slice(0, hash);
    const anchor = hash < 0 ? null : target.slice(hash + 1);
    let resolved = file;
    if (filePart !== '') {
      const decoded = decodeURIComponent(filePart);
      resolved = path.posix.normalize(decoded.startsWith('/') ? decoded.slice(1) : path.posix.join(path.posix.dirname(file), decoded));
      resolved = resolved.replace(/\/$/, '') || '.';
      if (resolved === '..' || resolved.startsWith('../')) {
        report('points outside the repository');
        continue;
      }
      if (!repo.exists(resolved)) {
        report(`no such file: ${resolved}`);
        continue;
      }
    }
    if (anchor === null) continue;
    if (!resolved.endsWith('.md')) {
      if (!/^L\d+(-L\d+)?$/.test(anchor)) report(`an anchor into ${resolved}, which is not Markdown`);
      continue;
    }
    const targetText = filePart === '' ? markdown : repo.read(resolved);
    if (targetText === undefined) report(`${resolved} is not a file`);
    else if (!anchorsOf(targetText).has(anchor)) report(`no heading '#${anchor}' in ${resolved}`);
  }
  return problems;
}

const fileRepo: Repo = {
  exists: (file) => existsSync(path.join(ROOT, file)),
  read: (file) => {
    try {
      return readFileSync(path.join(ROOT, file), 'utf8');
    } catch {
      return undefined;
    }
  },
};

function markdownUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return markdownUnder(rel);
    return entry.name.endsWith('.md') ? [rel] : [];
  });
}

const DOC_FILES = ['README.md', 'CHANGELOG.md', ...markdownUnder('docs')];

/** The files each `--config`, `--evolution` or `--changes` of a command line in the docs names, with their lines. */
function configsNamed(file: string, markdown: string): Array<{ line: number; config: string }> {
  const found: Array<{ line: number; config: string }> = [];
  markdown.split('\n').forEach((text, i) => {
    for (const match of text.matchAll(/--(?:config|evolution|changes)[ =]([\w./-]+\.(?:json|ya?ml))/g))
      found.push({ line: i + 1, config: match[1] });
  });
  return found;
}

describe('the documentation links', () => {
  test('every config file a command in README.md or docs/ names exists (examples/ and data/ as shipped)', () => {
    const named = DOC_FILES.flatMap((file) => configsNamed(file, fileRepo.read(file)!).map((c) => ({ file, ...c })));
    expect(named.filter((c) => c.config.startsWith('examples/')).length).toBeGreaterThan(10);
    const missing = named
      .filter((c) => /^(examples|data)\//.test(c.config) && !existsSync(path.join(ROOT, c.config)))
      .map((c) => `${c.file}:${c.line}: ${c.config}`);
    expect(missing).toEqual([]);
    expect(configsNamed('x.md', 'npx harness-s run start --config examples/nope.json --wait')).toEqual([
      { line: 1, config: 'examples/nope.json' },
    ]);
  });

  test('every relative link and anchor in README.md, CHANGELOG.md and docs/ resolves', () => {
    expect(DOC_FILES.length).toBeGreaterThan(10);
    const broken = DOC_FILES.flatMap((file) => brokenLinks(file, fileRepo.read(file)!, fileRepo));
    expect(broken).toEqual([]);
  });

  test('a broken link, a missing anchor and a link out of the repository are reported with their file and line', () => {
    const files: Record<string, string> = {
      'docs/a.md': [
        '# Alpha\n\n## Beta: `gamma.delta`\n\n## Beta: `gamma.delta`\n\n```bash\n# not a heading\n```\n',
        '```` ```json ```` at the start of a line opens no fence:\n\n## After the span\n',
      ].join(''),
      'core/x.ts': 'export {};\n',
      'docs/sub/b.md': '# B\n',
    };
    const repo: Repo = {
      exists: (file) => file in files || Object.keys(files).some((f) => f.startsWith(`${file}/`)),
      read: (file) => files[file],
    };
    const planted = [
      '# Here',
      '',
      '## A run\'s "report" (SIMULATED)',
      '',
      '[fine](a.md), [fine](a.md#alpha), [fine](a.md#beta-gammadelta), [fine](a.md#beta-gammadelta-1), [fine](a.md#after-the-span),',
      "[fine](#here), [fine](#a-runs-report-simulated), [fine](../core/x.ts), [fine](sub/), [fine](sub/b.md 'B'),",
      '[external](https://example.com/missing.md), `[in code](missing.md)`',
      '',
      '```',
      '[in a fence](missing.md)',
      '```',
      '',
      '[gone](missing.md) and [no anchor](a.md#gamma)',
      '[no such heading here](#nowhere) and [a third Beta](a.md#beta-gammadelta-2)',
      '[not a heading](a.md#not-a-heading), [out](../../etc/passwd), [code anchor](../core/x.ts#top)',
      '[text over',
      'two lines](sub/c.md)',
    ].join('\n');
    expect(brokenLinks('docs/here.md', planted, repo)).toEqual([
      'docs/here.md:13: missing.md: no such file: docs/missing.md',
      "docs/here.md:13: a.md#gamma: no heading '#gamma' in docs/a.md",
      "docs/here.md:14: #nowhere: no heading '#nowhere' in docs/here.md",
      "docs/here.md:14: a.md#beta-gammadelta-2: no heading '#beta-gammadelta-2' in docs/a.md",
      "docs/here.md:15: a.md#not-a-heading: no heading '#not-a-heading' in docs/a.md",
      'docs/here.md:15: ../../etc/passwd: points outside the repository',
      'docs/here.md:15: ../core/x.ts#top: an anchor into core/x.ts, which is not Markdown',
      'docs/here.md:16: sub/c.md: no such file: docs/sub/c.md',
    ]);
  });

  test("headings get GitHub's ids", () => {
    const ids = [
      ...anchorsOf(
        [
          '# Pipelined steps: `pipeline.maxStaleness`',
          '## Latency model (SIMULATED GPU time)',
          "### A run's report",
          '## Recover, resume, restore, fork',
          '## `harness-s bench`',
          '## **Bold** and _em_ with snake_case',
          '## Recover, resume, restore, fork',
        ].join('\n'),
      ),
    ];
    expect(ids).toEqual([
      'pipelined-steps-pipelinemaxstaleness',
      'latency-model-simulated-gpu-time',
      'a-runs-report',
      'recover-resume-restore-fork',
      'harness-s-bench',
      'bold-and-em-with-snake_case',
      'recover-resume-restore-fork-1',
    ]);
  });
});

describe('the front door', () => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

  test('README.md is at most 250 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
  });

  test('both quick-start commands are on the first screen (40 lines)', () => {
    const firstScreen = readme.split('\n').slice(0, 40).join('\n');
    expect(firstScreen).toContain('npm run demo');
    expect(firstScreen).toContain('npm test');
  });
});
