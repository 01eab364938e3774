/** When a process started, to tell a running worker from a pid that was reused after it died. */
import { readFileSync } from 'node:fs';

/** The start time of a process (clock ticks since boot, /proc/<pid>/stat's 22nd field), or null when there is no such process (or no /proc). */
export function startTimeOf(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may hold spaces: fields are counted after its closing one.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}
