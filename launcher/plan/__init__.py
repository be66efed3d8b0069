"""Plan: a validated spec turned into a frozen Plan (rendered files, distribution, Estimator arguments, the
predicted CreateTrainingJob request, advisories), and many specs or swept values into ranked plans. Pure: no AWS
call, no file written."""
