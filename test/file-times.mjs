#!/usr/bin/env node
// Where the suite's time goes: each test file's wall time from a Jest JSON
// report (`npx jest ... --json --outputFile=report.json`), longest first, with
// each project's total. `--write` also records them in test/durations.json,
// which orders and shards the files (test/sequencer.js).
//   node test/file-times.mjs report.json [more.json ...] [--write]
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);
const write = args.includes('--write');
const reports = args.filter((a) => a !== '--write');
if (reports.length === 0) {
  console.error('usage: node test/file-times.mjs report.json [more.json ...] [--write]');
  process.exit(2);
}
const times = new Map();
for (const report of reports) {
  for (const result of JSON.parse(readFileSync(report, 'utf8')).testResults) {
    times.set(path.relative(ROOT, result.name).split(path.sep).join('/'), (result.endTime - result.startTime) / 1000);
  }
}
const rows = [...times].sort((a, b) => b[1] - a[1]);
const totals = {};
for (const [file, s] of rows) totals[file.split('/')[1]] = (totals[file.split('/')[1]] ?? 0) + s;
for (const [file, s] of rows) console.log(`${s.toFixed(1).padStart(8)} s  ${file}`);
for (const [project, s] of Object.entries(totals)) console.log(`${s.toFixed(0).padStart(8)} s  total of test/${project}`);
if (write) {
  const file = path.join(ROOT, 'test', 'durations.json');
  let kept = {};
  try {
    kept = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    /* first write */
  }
  const merged = { ...kept, ...Object.fromEntries(rows.map(([f, s]) => [f, Math.round(s)])) };
  writeFileSync(file, JSON.stringify(Object.fromEntries(Object.entries(merged).sort()), null, 2) + '\n');
  console.log(`wrote ${path.relative(ROOT, file)}`);
}
