/* Fixture: the other half of the cycle. */
#include "a.h"
#include "b.h"
int b(void) { return 0; }
int c(void) { return a(); }
