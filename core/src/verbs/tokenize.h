/* fulgur tokenize: text files into llm.c token shards (fg_tokenize in fulgur/fulgur.h). */
#ifndef FG_TOKENIZE_H
#define FG_TOKENIZE_H

#include "fulgur/fulgur.h"

#endif
