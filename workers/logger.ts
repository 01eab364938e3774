/** Structured logs (pino) to stderr; stdout stays for results. */
import pino, { type Logger } from 'pino';

/** Level: the argument, else $LOG_LEVEL, else info. */
export function createLogger(name: string, level?: string): Logger {
  return pino({ name, level: level ?? process.env.LOG_LEVEL ?? 'info' }, pino.destination(2));
}
