/**
 * Errors a user must fix: a config, a task file, a harness spec, a missing
 * secret, an endpoint that answers outside its contract. Retrying cannot help,
 * so activities fail the run at once with the message (activities/failures.ts),
 * and the CLI prints the message alone. Each subclass names itself: its name
 * becomes the failure's type in Temporal.
 */
export class UserError extends Error {
  override name = 'UserError';
}
