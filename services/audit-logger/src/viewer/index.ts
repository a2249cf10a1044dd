/**
 * The trace viewer: static files (`public/`: one HTML page, one script, one stylesheet; no
 * build step, no CDN) served by the service itself at `/`. The page reads the audit API with
 * the bearer token the user typed (kept in sessionStorage).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import express, { type Router } from 'express';

/**
 * The `public/` directory of this package: `../../public` from both `src/viewer/` and
 * `dist/viewer/`.
 */
export const DEFAULT_PUBLIC_DIR = fileURLToPath(new URL('../../public/', import.meta.url));

// The page loads only its own script and stylesheet and talks only to this origin.
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Serve the viewer's static files from `publicDir`. @throws Error when it does not exist. */
export function createViewerRouter(publicDir: string = DEFAULT_PUBLIC_DIR): Router {
  if (!existsSync(publicDir)) throw new Error(`the viewer's files are missing: ${publicDir}`);
  const router = express.Router();
  router.use(
    express.static(publicDir, {
      index: 'index.html',
      fallthrough: true,
      maxAge: 0,
      // Only on the viewer's own files: other routes (e.g. /mcp) keep their headers.
      setHeaders(res) {
        res.setHeader('content-security-policy', CONTENT_SECURITY_POLICY);
        res.setHeader('x-content-type-options', 'nosniff');
        res.setHeader('referrer-policy', 'no-referrer');
      },
    }),
  );
  return router;
}
