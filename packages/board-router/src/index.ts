export { ConfigError, loadConfig, type RawOptions, type RouterConfig } from './config.js';
export { ROUTER_TAGS, type RouterErrorTag } from './errors.js';
export { type BoardRouter, startBoardRouter } from './router.js';
