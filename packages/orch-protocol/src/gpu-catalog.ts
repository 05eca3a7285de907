/**
 * The GPU vocabulary shared by the definition file's compile rules (`@orch/envdef`), what GPU
 * hosts report (`orch-agent`'s detection) and placement (`orchd`): model names, MIG profile names,
 * and how a reported device counts towards a request. One table, so a model the compiler accepts is
 * a model a host can report and the scheduler can match.
 */

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

/**
 * The catalog model of a GPU as `nvidia-smi` names it (`name` of `--query-gpu`, also in `-L`), or
 * undefined for a GPU the catalog does not know (reported, never matched). Product names seen in
 * NVIDIA's documentation and drivers: `NVIDIA H100 80GB HBM3`, `NVIDIA H100 PCIe`, `NVIDIA H100 NVL`,
 * `NVIDIA H200`, `NVIDIA L40S`, `NVIDIA L4`, `NVIDIA A10G`, `NVIDIA A100-SXM4-40GB`,
 * `NVIDIA A100 80GB PCIe`. The A100 comes in two memory sizes under similar names, so its memory
 * (MiB) decides: more than 48 GiB is the 80 GB part.
 *
 * @example gpuModelOf('NVIDIA H100 80GB HBM3', 81559) // 'h100'
 */
export function gpuModelOf(productName: string, memoryMib: number): string | undefined {
  const n = productName
    .trim()
    .toLowerCase()
    .replace(/^(nvidia|tesla)\s+/, '')
    .replace(/^(nvidia|tesla)\s+/, '');
  if (/^a100\b/.test(n)) return memoryMib > 48 * 1024 ? 'a100-80gb' : 'a100-40gb';
  if (/^h100\b/.test(n)) return 'h100';
  if (/^h200\b/.test(n)) return 'h200';
  if (/^l40s\b/.test(n)) return 'l40s';
  if (/^l4\b/.test(n)) return 'l4';
  if (/^a10g\b/.test(n)) return 'a10g';
  return undefined;
}

/** A MIG profile as `nvidia-smi mig` prints it (`MIG 1g.10gb`) in the catalog's spelling (`1g.10gb`). */
export function migProfileName(raw: string): string {
  return raw
    .trim()
    .replace(/^MIG\s+/i, '')
    .toLowerCase();
}

/**
 * The one reason a MIG slice is never given to a VM: a MIG instance is not a PCI device, so VFIO
 * cannot pass it through; only NVIDIA vGPU (a licensed mediated device) could, and hosts here have none.
 */
export const MIG_VM_REFUSAL =
  'MIG slices cannot be passed to a VM: a MIG instance is not a PCI device, so VFIO cannot pass it through (that needs NVIDIA vGPU, which this orchestrator does not manage); ask for a whole GPU';

/**
 * The key a GPU request is counted under (host supply and held devices alike): the model for whole
 * GPUs (`h100`), the model and profile for MIG instances (`h100/1g.10gb`).
 */
export function gpuKey(gpu: { readonly model: string; readonly mig?: string | undefined }): string {
  return gpu.mig === undefined ? gpu.model : `${gpu.model}/${gpu.mig}`;
}
