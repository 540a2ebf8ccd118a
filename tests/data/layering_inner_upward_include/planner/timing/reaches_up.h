// A step-time header that reaches up into the jobs that drive it: the layering check must reject it.
#include "planner/jobs/training_job.h"
