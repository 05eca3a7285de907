import manifest from '../package.json' with { type: 'json' };

/** The version of `board-node`: its package's own, from its package.json (`--version`, the listening log line, \`GET /health\`). */
export const BOARD_NODE_VERSION: string = manifest.version;
