import { z } from 'zod';

/** The repair directions siblings are evolved along (Directional Harness Evolution). */
export const RepairDirection = z.enum(['base', 'action_realization', 'environment_contract', 'trajectory_regulation', 'procedural_skill']);
export type RepairDirection = z.infer<typeof RepairDirection>;
