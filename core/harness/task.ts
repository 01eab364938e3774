/** A task as the runtime, the router and the workflows refer to it: its id and its kind. */
export interface TaskRef {
  taskId: string;
  /** The task's category, the unit the router's profiles are kept by. */
  kind: string;
}
