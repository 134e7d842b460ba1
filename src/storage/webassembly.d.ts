// The part of the WebAssembly API db.ts uses (Node has it; TypeScript declares it only in its DOM
// and web worker libraries, which a server must not pull in).
declare namespace WebAssembly {
  interface Module {}
  function compile(bytes: Uint8Array): Promise<Module>;
}
