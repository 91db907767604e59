/* ir_check.h — what the C tests of the IR and its passes share (test_ir.c,
 * test_passes.c, test_fold.c): one assertion macro that counts and reports
 * every broken check with file:line instead of stopping at the first, and a
 * shape literal.  main() returns `fails != 0` after printing `checks`. */
#ifndef NCC_TEST_IR_CHECK_H
#define NCC_TEST_IR_CHECK_H
#include <stdarg.h>
#include <stdio.h>

#include "ir/ir.h"

static int fails, checks;
#define CHECK(c) do { checks++; if (!(c)) { fails++; fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* S(3, 2, 4, 4): a shape of rank 3 */
static inline Shape S(int rank, ...) {
  Shape s = {rank, {0}};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++) s.d[i] = va_arg(ap, int);
  va_end(ap);
  return s;
}
#endif
