// The CLI as an OAuth client of the issuer's sign-in (RFC 8252): the issuer accepts this client
// id (auth/sign-in/) and `bulwark auth login` presents it (cli/browser-login.ts). It lives below
// both, so the CLI knows it without loading the server's sign-in code.

/** The CLI: a public client (no secret), per RFC 8252. */
export const CLI_CLIENT_ID = "bulwark-cli";
