/**
 * Where the trajectory viewer (harness-s ui) listens and where users open it:
 * read from the environment once by the processes that serve it or link to
 * it (the CLI, the workers, for a run's Temporal page), and passed down.
 */
import { UserError } from './errors';

export const UI_PORT_VARIABLE = 'HARNESS_S_UI_PORT';
export const UI_HOST_VARIABLE = 'HARNESS_S_UI_HOST';
export const DEFAULT_UI_PORT = 8240;
export const DEFAULT_UI_HOST = '127.0.0.1';

export class ViewerConfigError extends UserError {
  override name = 'ViewerConfigError';
}

/** Where the viewer listens: $HARNESS_S_UI_PORT (default 8240) on $HARNESS_S_UI_HOST (default loopback). */
export function viewerAddressFromEnv(env: NodeJS.ProcessEnv = process.env): { host: string; port: number } {
  const raw = (env[UI_PORT_VARIABLE] ?? '').trim();
  const port = raw === '' ? DEFAULT_UI_PORT : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ViewerConfigError(`${UI_PORT_VARIABLE}='${raw}' is not a port: use a number from 1 to 65535 (0: any free port)`);
  }
  return { host: (env[UI_HOST_VARIABLE] ?? '').trim() || DEFAULT_UI_HOST, port };
}

export const UI_URL_VARIABLE = 'HARNESS_S_UI_URL';

/**
 * Where users open the viewer, for links to it from reports and a run's
 * Temporal page: $HARNESS_S_UI_URL (a viewer behind a proxy or on another
 * machine), else the address it listens on here; null for 'off'.
 */
export function viewerUrlFromEnv(env: NodeJS.ProcessEnv = process.env): string | null {
  const url = (env[UI_URL_VARIABLE] ?? '').trim();
  if (url.toLowerCase() === 'off') return null;
  if (url) {
    if (!/^https?:\/\/[^/]+/.test(url))
      throw new ViewerConfigError(
        `${UI_URL_VARIABLE}='${url}' is not an http(s) address: give one like http://host:8240, or 'off' for no links`,
      );
    return url.replace(/\/+$/, '');
  }
  const { host, port } = viewerAddressFromEnv(env);
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${port || DEFAULT_UI_PORT}`;
}
