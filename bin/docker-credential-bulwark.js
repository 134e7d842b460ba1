#!/usr/bin/env node
// docker's credential helper for the bulwark registry (`bulwark auth configure-docker` sets it up);
// runs the compiled helper (npm run build writes dist/).
import "../dist/cli/docker-credential.js";
