/** The env kind that is the simulator's: a name only, so configs and reports can ask it without the sim env's code. */
export const SIM_KIND = 'sim';

/** Whether an env id is the simulator's: everything that shows its results says SIMULATED. */
export function isSimulatedEnv(envId: string | undefined): boolean {
  return envId === SIM_KIND;
}
