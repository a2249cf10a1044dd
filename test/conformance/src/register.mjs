/**
 * `node --import ./src/register.mjs …/@modelcontextprotocol/conformance/dist/index.js …`
 *
 * The conformance CLI imports `globSync` from `fs`, which Node 20 does not have (it came in
 * Node 22). This registers a loader hook (./fs-loader.mjs) that hands the conformance package
 * ./fs-shim.mjs instead: everything from `node:fs` plus a minimal `globSync`.
 */
import { register } from 'node:module';

register('./fs-loader.mjs', import.meta.url);
