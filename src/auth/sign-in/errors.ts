// How a sign-in fails, in OAuth's terms: the error code (RFC 6749 §4.1.2.1, §5.2; RFC 8628 §3.5)
// and a description for the person.
export class LoginError extends Error {
  constructor(
    readonly oauthError: string,
    message: string,
  ) {
    super(message);
  }
}
