/** A GPU model the definition file may request, and the MIG profiles it offers (empty: not MIG-capable). */
export interface GpuModel {
  readonly name: string;
  readonly migProfiles: readonly string[];
}

/** The GPU catalog of environment-definition.md ("GPU and MIG"), in the table's order. */
export const GPU_MODELS: readonly GpuModel[] = [
  { name: 'a100-40gb', migProfiles: ['1g.5gb', '2g.10gb', '3g.20gb', '4g.20gb', '7g.40gb'] },
  { name: 'a100-80gb', migProfiles: ['1g.10gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb'] },
  { name: 'h100', migProfiles: ['1g.10gb', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb'] },
  { name: 'h200', migProfiles: ['1g.18gb', '1g.35gb', '2g.35gb', '3g.71gb', '4g.71gb', '7g.141gb'] },
  { name: 'l4', migProfiles: [] },
  { name: 'l40s', migProfiles: [] },
  { name: 'a10g', migProfiles: [] },
];

/** Looks a model up by its exact name. */
export function findGpuModel(name: string): GpuModel | undefined {
  return GPU_MODELS.find((m) => m.name === name);
}
