/* Fixture: a.c and b.c include each other's headers. */
#include "a.h"
#include "b.h"
int a(void) { return b() + 1; }
