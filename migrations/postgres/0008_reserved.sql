-- Reserved for the workflows (issue 17), built on another branch; this
-- placeholder keeps the numbers dense until that branch's 0008 lands.
SELECT 1;
