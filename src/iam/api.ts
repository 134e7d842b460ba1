// The IAM module's public face: the only file of iam that code outside it (other features,
// server/, cli/) imports (test/architecture.test.ts).
export { iamModule, IDP_CLIENT_SECRETS } from "./module.js";
