/** Builds unless dist/ already holds the build of the present inputs; true when it built. */
export function build(options?: { ifChanged?: boolean }): boolean;
