// Counting a process's large Buffers: glibc maps each allocation of 128 KiB or more and, once it
// frees one, serves every smaller one from its main arena for the rest of the process
// (src/core/outside-malloc.ts). Tests run this code first in a child (node -e, or --import).

/**
 * JavaScript that wraps Buffer.allocUnsafe and allocUnsafeSlow (fs.readFile and readFileSync make
 * theirs so) and pushes the size of each of 1 MiB or more onto a global array, `large`.
 */
export const COUNT_LARGE_BUFFERS = `
  const large = [];
  for (const name of ["allocUnsafe", "allocUnsafeSlow"]) {
    const allocate = Buffer[name];
    Buffer[name] = function (size, ...rest) {
      if (size >= 1 << 20) large.push(size);
      return allocate.call(this, size, ...rest);
    };
  }
`;
