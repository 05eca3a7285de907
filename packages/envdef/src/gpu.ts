/**
 * The GPU catalog the compile rules check against is `@orch/protocol`'s, the vocabulary GPU hosts
 * report and orchd places by: one table for the definition file, the agents and the scheduler.
 */
export { findGpuModel, GPU_MODELS, type GpuModel } from '@orch/protocol/rules';
