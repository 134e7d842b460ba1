#!/usr/bin/env node
// docker's credential helper for the bulwark registry (`bulwark auth configure-docker` sets it up);
// runs the helper as `npm run build` bundled it (dist/bundle).
import "../dist/bundle/docker-credential.js";
