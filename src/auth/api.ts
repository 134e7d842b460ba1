// The auth module's public face: the only file of auth that code outside it (other features,
// server/, cli/) imports (test/architecture.test.ts). What the running module offers other
// modules is its `exports` (AuthExports, through `ctx.exportsOf(authModule)`); the rest here is
// for the operator's tools that open the database themselves (`bulwark admin token`).
export { authModule, issuerKeyFile, type AuthExports } from "./module.js";
export { ANONYMOUS_SUBJECT, OPERATOR_SUBJECT, TokenIssuer, type AuthUrls, type KeySource } from "./tokens.js";
export { KeyManager, readKeyFile, type SigningKey } from "./keys.js";
export { recordedListenUrlFile, recordedPublicUrls, recordedPublicUrlsFile } from "./recorded-urls.js";
export {
  AuthEvents,
  CREDENTIALS_REFUSED_EVENT,
  REGISTRY_LOGIN_EVENT,
  SIGNED_IN_EVENT,
  TOKEN_EXCHANGED_EVENT,
} from "./events.js";
