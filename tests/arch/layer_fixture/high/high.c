/* A downward include: high/ may call low/. */
#include "high.h"
#include "low.h"

int high_value(void) { return low_value() + 1; }
