// A scenario header that reaches up into the planner: the layering check must reject it.
#include "planner/jobs/training_job.h"
