/**
 * AgentBench v0.2's DBBench protocol, as the base harness speaks it: the
 * instruction AgentBench sends, the first user message it builds from a task,
 * how it reads one assistant message (an SQL operation or a final answer),
 * and the answer list it scores.
 */
import { parsePythonLiteral } from './python-literal';
import { pyList, pythonStrip, type PyValue } from './python-values';

/** The instruction AgentBench v0.2 sends (as its first user turn, answered by "Ok."), verbatim. */
export const AGENTBENCH_SYSTEM_PROMPT = `
I will ask you a question, then you should help me operate a MySQL database with SQL to answer the question.
You have to explain the problem and your solution to me and write down your thoughts.
After thinking and explaining thoroughly, every round you can choose to operate or to answer.
your operation should be like this:
Action: Operation
\`\`\`sql
SELECT * FROM table WHERE condition;
\`\`\`
You MUST put SQL in markdown format without any other comments. Your SQL should be in one line.
Every time you can only execute one SQL statement. I will only execute the statement in the first SQL code block. Every time you write a SQL, I will execute it for you and give you the output.
If you are done operating, and you want to commit your final answer, then write down:
Action: Answer
Final Answer: ["ANSWER1", "ANSWER2", ...]
DO NOT write this pattern unless you are sure about your answer. I expect an accurate and correct answer.
Your answer should be accurate. Your answer must be exactly the same as the correct answer.
If the question is about modifying the database, then after done operation, your answer field can be anything.
If your response cannot match any pattern I mentioned earlier, you will be judged as FAIL immediately.
Your input will be raw MySQL response, you have to deal with it by yourself.
`;

/** The agent turn AgentBench injects after its instruction. */
export const AGENTBENCH_PROMPT_ACK = 'Ok.';

/** AgentBench's `max_round` for DBBench (configs/tasks/dbbench.yaml): SQL operations executed per episode. */
export const AGENTBENCH_MAX_ROUNDS = 15;

/**
 * Assistant turns an episode of `maxRounds` rounds allows: every round's
 * operation, then one more reply that may only give the final answer.
 */
export function agentBenchTurnBudget(maxRounds: number = AGENTBENCH_MAX_ROUNDS): number {
  return maxRounds + 1;
}

/** The first user message of an episode: the question, a newline, the table description. */
export function agentBenchTaskPrompt(task: { description: string; add_description: string }): string {
  return `${task.description}\n${task.add_description}`;
}

/** The whole opening as AgentBench sends it: instruction, "Ok.", the task. */
export function agentBenchOpening(task: { description: string; add_description: string }) {
  return [
    { role: 'user' as const, content: AGENTBENCH_SYSTEM_PROMPT },
    { role: 'assistant' as const, content: AGENTBENCH_PROMPT_ACK },
    { role: 'user' as const, content: agentBenchTaskPrompt(task) },
  ];
}

// ---------------------------------------------------------------------------
// Reading one assistant message

export type DbBenchAction =
  /** `Action: Operation` and the first ```sql block (newlines turned to spaces, as AgentBench does). */
  | { kind: 'sql'; sql: string }
  /** A `Final Answer:` line; `raw` is the rest of that line exactly as AgentBench stores it. */
  | { kind: 'answer'; raw: string }
  | { kind: 'invalid'; reason: string };

// Python's `.` matches everything but \n (JS's also stops at \r, \u2028, \u2029), hence [^\n].
const ACTION_LINE = /Action: ([^\n]*?)\n/;
const SQL_BLOCK = /```sql\n([\s\S]*?)\n```/;
const FINAL_ANSWER = /\nFinal Answer:([^\n]*)/;

/**
 * One assistant message, read as AgentBench v0.2 reads it. The first
 * `Action: X` line decides: exactly `Operation` means SQL, and then a missing
 * ```sql block is a format error; anything else (another action, or no action
 * line at all) is taken as an answer when a line `Final Answer:` follows a
 * newline, else a format error. AgentBench ends the episode on a format error.
 */
export function parseAgentBenchAction(text: string): DbBenchAction {
  const action = ACTION_LINE.exec(text);
  if (action && action[1] === 'Operation') {
    const block = SQL_BLOCK.exec(text);
    if (!block) return { kind: 'invalid', reason: 'Action: Operation without a ```sql code block' };
    return { kind: 'sql', sql: pythonStrip(block[1]).replace(/\n/g, ' ') };
  }
  const answer = parseFinalAnswer(text);
  if (answer !== null) return { kind: 'answer', raw: answer };
  return {
    kind: 'invalid',
    reason: action
      ? `Action: ${action[1]} is neither Operation nor followed by a Final Answer line`
      : 'no "Action:" line and no "Final Answer:" line',
  };
}

/** The `Final Answer:` line's rest, or null. At the turn limit AgentBench looks for this only. */
export function parseFinalAnswer(text: string): string | null {
  const match = FINAL_ANSWER.exec(text);
  return match ? match[1] : null;
}

/**
 * The answer list AgentBench v0.2 scores: `list(eval(raw))`, or `[raw]` when
 * that raises. `raw` is the text after "Final Answer:" ('' when there was none).
 */
export function agentBenchAnswerItems(raw: string): PyValue[] {
  const value = parsePythonLiteral(raw);
  const items = value ? pyList(value) : null;
  return items ?? [{ type: 'str', value: raw }];
}
