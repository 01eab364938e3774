/**
 * What a SIMULATED cluster process answered on its inference API, for tests
 * and tools that check how requests spread over replicas and which policy
 * version each replica served (GET /sim/requests; POST /sim/requests/reset
 * zeroes it). Always on, with or without the latency model.
 *
 * Counted: chat completions and completions answered 200, by model name;
 * LoRA adapters loaded (200), by name; every inference API answer of status
 * 400 or more, by status; and every request refused because this process
 * does not serve its part (a 404, see server.ts). The trainer API's own
 * answers are not counted (its 408 long polls are not errors).
 */

/** Which APIs one sim cluster process serves: both (the default), or one part, as a stand-in for one vLLM replica or for the trainer. */
export const SIM_CLUSTER_PARTS = ['all', 'inference', 'trainer'] as const;
export type SimClusterServes = (typeof SIM_CLUSTER_PARTS)[number];

/** The JSON of GET /sim/requests. */
export interface SimRequestReport {
  simulated: true;
  serves: SimClusterServes;
  /** When counting started: the process's start or the last reset. */
  since: string;
  chatCompletions: { total: number; byModel: Record<string, number> };
  completions: { total: number; byModel: Record<string, number> };
  adapterLoads: { total: number; byName: Record<string, number> };
  errors: { total: number; byStatus: Record<string, number> };
  /** Chat completions and completions received and not yet answered (now, not since the reset). */
  inFlight: number;
}

interface Tally {
  total: number;
  byKey: Map<string, number>;
}

const emptyTally = (): Tally => ({ total: 0, byKey: new Map() });

/** The route counted by model name in the request body. */
const COMPLETION_ROUTES: Record<string, 'chatCompletions' | 'completions'> = {
  'POST /v1/chat/completions': 'chatCompletions',
  'POST /v1/completions': 'completions',
};

export class SimRequestCounts {
  private since = new Date();
  private chatCompletions = emptyTally();
  private completions = emptyTally();
  private adapterLoads = emptyTally();
  private errors = emptyTally();
  private inFlight = 0;

  constructor(private readonly serves: SimClusterServes) {}

  /**
   * Counts one inference API request from its arrival; the returned function
   * records its answer's status. `body` is the parsed JSON body, if any.
   */
  begin(method: string, path: string, body: unknown): (status: number) => void {
    const route = `${method} ${path}`;
    const completion = COMPLETION_ROUTES[route];
    if (completion) this.inFlight += 1;
    return (status) => {
      if (completion) this.inFlight -= 1;
      if (status >= 400) add(this.errors, String(status));
      else if (status === 200 && completion) add(this[completion], stringField(body, 'model'));
      else if (status === 200 && route === 'POST /v1/load_lora_adapter') add(this.adapterLoads, stringField(body, 'lora_name'));
    };
  }

  /** A request refused because this process does not serve its part. */
  refused(status: number): void {
    add(this.errors, String(status));
  }

  report(): SimRequestReport {
    const byKey = (tally: Tally) => Object.fromEntries([...tally.byKey].sort(([a], [b]) => a.localeCompare(b)));
    return {
      simulated: true,
      serves: this.serves,
      since: this.since.toISOString(),
      chatCompletions: { total: this.chatCompletions.total, byModel: byKey(this.chatCompletions) },
      completions: { total: this.completions.total, byModel: byKey(this.completions) },
      adapterLoads: { total: this.adapterLoads.total, byName: byKey(this.adapterLoads) },
      errors: { total: this.errors.total, byStatus: byKey(this.errors) },
      inFlight: this.inFlight,
    };
  }

  /** Zeroes the counts; requests in flight stay counted as in flight. */
  reset(): void {
    this.since = new Date();
    this.chatCompletions = emptyTally();
    this.completions = emptyTally();
    this.adapterLoads = emptyTally();
    this.errors = emptyTally();
  }
}

function add(tally: Tally, key: string): void {
  tally.total += 1;
  tally.byKey.set(key, (tally.byKey.get(key) ?? 0) + 1);
}

/** A 200 answer was to a valid body, so the field is there; '(unknown)' only guards the type. */
function stringField(body: unknown, field: string): string {
  const value = (body as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'string' ? value : '(unknown)';
}
