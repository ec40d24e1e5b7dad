import { defineConfig } from 'vite';

// The UI is served by the Go binary at "/" (spool serve) and by the desktop
// webview's asset server, so asset URLs are relative to the page.
export default defineConfig({
  base: './',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 1200,
  },
  server: {
    port: 5173,
    strictPort: true,
    // `npm run dev` proxies the API to a running `spool serve`.
    proxy: {
      '/v1': { target: 'http://127.0.0.1:8484', ws: true },
      '/ui': 'http://127.0.0.1:8484',
      '/stats': 'http://127.0.0.1:8484',
      '/health': 'http://127.0.0.1:8484',
    },
  },
});
