import manifest from '../package.json' with { type: 'json' };

/** The version of `orchd`: its package's own, from its package.json (`--version`, the listening log line, \`GET /v1/info\`). */
export const ORCHD_VERSION: string = manifest.version;
