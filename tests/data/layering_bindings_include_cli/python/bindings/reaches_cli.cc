// A binding that calls the CLI instead of the library: the layering check must reject it.
#include "cli/commands.h"
