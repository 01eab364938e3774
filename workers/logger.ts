/** Structured logs (pino) to stderr; stdout stays for results. */
import pino, { type Logger } from 'pino';
import { processSettings } from '../core/settings';

/** Level: the argument, else $LOG_LEVEL, else info. */
export function createLogger(name: string, level?: string): Logger {
  return pino({ name, level: level ?? processSettings().logLevel ?? 'info' }, pino.destination(2));
}
