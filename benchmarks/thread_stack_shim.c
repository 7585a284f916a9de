/* Preloaded into the SAX benchmarks (benchmarks/sax_circuit.py, ensure_deep_thread_stacks):
 * every thread stack asked for below MIN_STACK bytes gets MIN_STACK.
 *
 * Why: XLA's CPU compiler (jaxlib 0.9) links a jitted function's kernels on a thread pool
 * whose threads have 512 kB stacks; once a worker's task queue (1,024 entries) is full, its
 * task dispatch runs the next task inline, one more level of recursion per kernel. SAX's
 * hex:6x6 circuit has well over 1,024 kernels: at 2,078 frames the stack overflowed and the
 * process died of SIGSEGV without a message (gdb backtrace, 2026-11-27). Whether the queue
 * fills depends on timing, so the crash came and went with the machine's load. 64 MB is
 * address space reserved per thread, not memory used.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#define MIN_STACK ((size_t)64 << 20)

int pthread_attr_setstacksize(pthread_attr_t *attr, size_t size) {
    static int (*real)(pthread_attr_t *, size_t);
    if (!real) real = (int (*)(pthread_attr_t *, size_t))dlsym(RTLD_NEXT, "pthread_attr_setstacksize");
    return real(attr, size < MIN_STACK ? MIN_STACK : size);
}
