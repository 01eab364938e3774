/**
 * Where the Temporal server is, for every process that connects to it (the
 * workers, the CLI, the embedded stack): $TEMPORAL_ADDRESS and
 * $TEMPORAL_NAMESPACE, else the dev server's defaults.
 */
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
export const DEFAULT_NAMESPACE = 'default';

export function temporalAddressFromEnv(): string {
  return process.env.TEMPORAL_ADDRESS || DEFAULT_TEMPORAL_ADDRESS;
}

export function namespaceFromEnv(): string {
  return process.env.TEMPORAL_NAMESPACE || DEFAULT_NAMESPACE;
}
