/** `harness-s report RUN` and the demo: the run's report (core/report/run-report.ts) written to a folder. */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadRunReport, runReportPage } from '../../core/report/run-report';
import type { RunStore } from '../../core/store/run-store';
import { DATA_DIR } from '../../infra/temporal-dev-server';

/** Where a run's report goes by default: .data/reports/<run id>/. */
export function defaultReportDir(id: string): string {
  return path.join(DATA_DIR, 'reports', id.replace(/[^A-Za-z0-9._-]/g, '_'));
}

/** Writes the run's report to `dir/index.html`; returns that path. */
export async function writeRunReport(options: { store: RunStore; runId: string; dir: string; viewerUrl?: string | null }): Promise<string> {
  const html = await runReportPage(await loadRunReport(options.store, options.runId), new Date(), options.viewerUrl ?? null);
  await mkdir(options.dir, { recursive: true });
  const file = path.resolve(options.dir, 'index.html');
  await writeFile(file, html);
  return file;
}
