/** Budget of open replicas. */
export interface ReplicaBudget {
  maxOpen: number;
  memoryMb: number;
  /** DuckDB threads of each replica (see `DuckSettings`). */
  threads: number;
}

/**
 * Smallest DuckDB `memory_limit` of a replica, in MB: eight times the text one change record may
 * carry (`MAX_MUTATION_TEXT_BYTES`, 8 MiB), which a replica applies in one transaction and holds
 * until it commits (README, "Budget").
 */
export const MIN_REPLICA_MEMORY_MB = 64;

/**
 * Replicas assumed to need their memory at the same time: each DuckDB instance's `memory_limit` is a
 * ceiling, not an allocation, and the budget itself is enforced over the sampled use of all open
 * replicas (LRU closes), so each may use a quarter of the budget (256 MB by default) rather than a
 * sixteenth (64 MB: a full scan of 55 MB of 64 KiB texts ran out of it, README "Budget").
 */
export const HEAVY_REPLICAS = 4;

/**
 * Memory limit given to each replica's DuckDB instance: the budget shared by at most
 * {@link HEAVY_REPLICAS} replicas, at least {@link MIN_REPLICA_MEMORY_MB} (README, "Budget").
 */
export function replicaMemoryMb(budget: ReplicaBudget): number {
  const share = Math.floor(budget.memoryMb / Math.min(budget.maxOpen, HEAVY_REPLICAS));
  return Math.max(MIN_REPLICA_MEMORY_MB, share);
}
