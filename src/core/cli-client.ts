// The issuer's own OAuth clients (RFC 8252 for the CLI, a browser app for the console): the issuer
// accepts these client ids (auth/sign-in/), `bulwark auth login` (cli/browser-login.ts) and the web
// console (console/src/session.ts) present them. It lives below all of them, so the CLI knows its id
// without loading the server's sign-in code.

/** The CLI: a public client (no secret), per RFC 8252. */
export const CLI_CLIENT_ID = "bulwark-cli";

/** The web console the server serves at `/`: a public client (no secret) on the server's own origin. */
export const CONSOLE_CLIENT_ID = "bulwark-console";

/** Where the console receives its authorization code: on an origin of the server's own public URLs. */
export const CONSOLE_CALLBACK_PATH = "/console/callback";
