#!/usr/bin/env node
// Runs the CLI as `npm run build` bundled it (dist/bundle; scripts/bundle.mjs says why a bundle).
import "../dist/bundle/launch.js";
