/* Everything a plugin author includes. */
#ifndef FULGUR_SDK_H
#define FULGUR_SDK_H
#include "fulgur/plugin.h"
#include "fulgur/types.h"
#include "fulgur/backend.h"
#include "fulgur/precision.h"
#include "fulgur/strategy.h"
#include "fulgur/comm.h"
#include "fulgur/data.h"
#include "fulgur/callback.h"
#endif
